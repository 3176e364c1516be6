"""A P4 program with its own extern functions and the Python module implementing them."""
