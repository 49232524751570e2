"""What the CLI shows of each job's result: tables, plots' paths and closing lines, drawn with rich."""
