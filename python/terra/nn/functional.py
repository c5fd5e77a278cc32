"""terra.nn.functional: functional forms of the layers and losses (torch.nn.functional names and
argument orders). Each is the bound C++ op itself where the signature already matches."""
from .. import _terra

linear = _terra.linear                  # (input, weight, bias=None)
conv2d = _terra.conv2d                  # (input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)
conv_transpose2d = _terra.conv_transpose2d
max_pool2d = _terra.max_pool2d          # (input, kernel_size, stride=None, padding=0)
avg_pool2d = _terra.avg_pool2d
adaptive_avg_pool2d = _terra.adaptive_avg_pool2d
batch_norm = _terra.batch_norm          # (input, running_mean, running_var, weight, bias, training, momentum, eps)
layer_norm = _terra.layer_norm          # (input, normalized_shape, weight=None, bias=None, eps=1e-5)
embedding = _terra.embedding            # (input, weight, padding_idx=None)
relu = _terra.relu
leaky_relu = _terra.leaky_relu
gelu = _terra.gelu
tanh = _terra.tanh
sigmoid = _terra.sigmoid
softplus = _terra.softplus
softmax = _terra.softmax                # (input, dim)
log_softmax = _terra.log_softmax
cross_entropy = _terra.cross_entropy    # (input, target, ignore_index=-100, reduction="mean")
nll_loss = _terra.nll_loss
mse_loss = _terra.mse_loss              # (input, target, reduction="mean")
binary_cross_entropy_with_logits = _terra.binary_cross_entropy_with_logits


def dropout(input, p=0.5, training=True):
    """Zeroes elements with probability p and scales the rest by 1/(1-p) when training."""
    return _terra.dropout(input, p, training)


def interpolate(input, size=None, scale_factor=None, mode="nearest"):
    if mode != "nearest":
        raise ValueError(f"[interpolate] only mode='nearest' is supported, got '{mode}'")
    return _terra.upsample_nearest2d(input, size, scale_factor)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(q k^T * scale + mask) v, scale defaulting to 1/sqrt(D): the fused op, or with active
    dropout the same attention written with the bound ops (dropout draws a number per weight)."""
    if dropout_p <= 0.0:
        return _terra.scaled_dot_product_attention(query, key, value, attn_mask, is_causal, scale)
    s = scale if scale is not None else 1.0 / (query.shape[-1] ** 0.5)
    scores = _terra.matmul(query * s, key.transpose(-2, -1))
    if is_causal:
        sq, sk = scores.shape[-2], scores.shape[-1]
        causal = _terra.arange(sk).reshape(1, sk) > _terra.arange(sq).reshape(sq, 1)
        scores = _terra.masked_fill(scores, causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == _terra.bool:
            scores = _terra.masked_fill(scores, attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    w = _terra.dropout(_terra.softmax(scores, -1), dropout_p, True)
    return _terra.matmul(w, value)
