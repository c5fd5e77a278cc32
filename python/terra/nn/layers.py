"""Layers. The C++ layers of libterra (terra::nn) are wrapped so that their parameters are the same
tensors as the Python Parameters; containers are plain Python."""
__all__ = []
