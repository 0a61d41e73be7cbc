"""Development tooling for the agent knowledge bundle: the local stack built from
`template.yaml`, the local API gateway and the admin CLI. Not shipped in the Lambda layer."""
