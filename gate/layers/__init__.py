"""The gate's layers, one module each; `gate.layers.registry` lists them in the order they run."""
