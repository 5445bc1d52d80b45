"""Adapters that join a scheduler dialect (pure, in backends/) to a transport."""
