"""terra.nn: Module (subclassable in Python), Parameter, layers, and terra.nn.functional."""
from .module import Module, Parameter
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layers_all
from . import functional, init  # noqa: F401

__all__ = ["Module", "Parameter", "functional", "init"] + list(_layers_all)
