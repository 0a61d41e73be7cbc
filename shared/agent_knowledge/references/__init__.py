"""Opaque signed tokens: the codec, what references bind, and the container's signing codec."""
