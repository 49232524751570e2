"""Result records: their schema (`record`) and the run folders that hold them (`store`)."""
