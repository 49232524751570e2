"""The probe job: timed matmul and copy on the local device, shipped as metrics (`fleetbench probe`)."""
