"""The model and the plan: from the inventory's variables to everything the hosts get."""
