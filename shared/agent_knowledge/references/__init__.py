"""Opaque signed tokens: the codec, what references bind, and the server signing key."""
