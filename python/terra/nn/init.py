"""terra.nn.init: in-place initializers (terra::nn::init); each returns its tensor."""
from .. import _terra

_init = _terra._nn_init
calculate_gain = _init.calculate_gain
uniform_ = _init.uniform_
normal_ = _init.normal_
constant_ = _init.constant_
zeros_ = _init.zeros_
ones_ = _init.ones_
kaiming_uniform_ = _init.kaiming_uniform_
kaiming_normal_ = _init.kaiming_normal_
xavier_uniform_ = _init.xavier_uniform_
xavier_normal_ = _init.xavier_normal_


def _calculate_fan_in_and_fan_out(tensor):
    return _init.calculate_fan_in_and_fan_out(tensor)
