"""The one door from an inventory to the model: reading it, and host variables -> model."""
