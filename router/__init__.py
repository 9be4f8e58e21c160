"""The cuzk router (issue 52): dispatches Curio's SNARKs to the fleet's machines."""
