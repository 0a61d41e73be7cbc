"""The write side: documents in, chunks and index generations out. No query function imports it."""
