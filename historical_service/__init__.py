"""The historical node: loads immutable segments, announces them, answers queries over them."""
