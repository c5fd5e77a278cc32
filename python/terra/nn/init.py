"""terra.nn.init: in-place initializers."""
