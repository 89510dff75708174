"""Built-in policies, one module per paper; importing this package registers them all."""
