"""The group coordinator: committed offsets in ``__consumer_offsets`` (group membership later)."""
