"""What every Lambda function shares at run time: the HTTP adapter, entry points, container wiring, SnapStart."""
