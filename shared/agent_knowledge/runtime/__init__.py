"""What every Lambda function shares at run time: the HTTP adapter, container wiring, observability, the clock."""
