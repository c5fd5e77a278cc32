"""terra.nn.functional: functional forms of the layers and losses."""
