"""Deep-learning layers (NPBench's deep_learning kernels), float32 NHWC:
softmax, an MLP, a direct 2-D convolution with bias, LeNet-5 and a ResNet
basic block (convolutions as loops over output pixels with axis reductions)."""
import numpy as np

from bench.corpus import kernel


def _relu(x):
    return np.maximum(x, 0)


def _softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _conv2d(x, w):
    # valid convolution, NHWC input, (K, K, C_in, C_out) weights
    K = w.shape[0]
    H_out = x.shape[1] - K + 1
    W_out = x.shape[2] - K + 1
    out = np.empty((x.shape[0], H_out, W_out, w.shape[3]), dtype=np.float32)
    for i in range(H_out):
        for j in range(W_out):
            patch = x[:, i:i + K, j:j + K, :, np.newaxis]
            out[:, i, j, :] = np.sum(patch * w[np.newaxis], axis=(1, 2, 3))
    return out


def _maxpool2d(x):
    H, W = x.shape[1] // 2, x.shape[2] // 2
    out = np.empty((x.shape[0], H, W, x.shape[3]), dtype=x.dtype)
    for i in range(H):
        for j in range(W):
            out[:, i, j, :] = np.max(x[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2, :], axis=(1, 2))
    return out


def _batchnorm2d(x, eps=1e-5):
    mean = np.mean(x, axis=0, keepdims=True)
    std = np.std(x, axis=0, keepdims=True)
    return (x - mean) / np.sqrt(std + eps)


def softmax(x):
    return _softmax(x)


def mlp(input, w1, b1, w2, b2, w3, b3):
    x = _relu(input @ w1 + b1)
    x = _relu(x @ w2 + b2)
    return _softmax(x @ w3 + b3)


def conv2d_bias(input, weights, bias):
    return _conv2d(input, weights) + bias


def lenet5(input, conv1, conv1bias, conv2, conv2bias, fc1w, fc1b, fc2w, fc2b, fc3w, fc3b, N, C_before_fc1):
    x = _maxpool2d(_relu(_conv2d(input, conv1) + conv1bias))
    x = _maxpool2d(_relu(_conv2d(x, conv2) + conv2bias))
    x = np.reshape(x, (N, C_before_fc1))
    x = _relu(x @ fc1w + fc1b)
    x = _relu(x @ fc2w + fc2b)
    return x @ fc3w + fc3b


def resnet_basicblock(input, conv1, conv2, conv3):
    # the padding is float64 (np.zeros' default); the convolutions write float32
    padded = np.zeros((input.shape[0], input.shape[1] + 2, input.shape[2] + 2, conv1.shape[3]))
    padded[:, 1:-1, 1:-1, :] = _conv2d(input, conv1)
    x = _relu(_batchnorm2d(padded))
    x = _relu(_batchnorm2d(_conv2d(x, conv2)))
    x = _batchnorm2d(_conv2d(x, conv3))
    return _relu(x + input)


# ------------------------------------------------------------------ inputs

def _f32(rng, *shape):
    return rng.random(shape, dtype=np.float32)


def _init_softmax(rng, N, H, SM):
    return (_f32(rng, N, H, SM, SM),)


def _init_mlp(rng, C_in, N, S0, S1, S2):
    return (_f32(rng, N, C_in), _f32(rng, C_in, S0), _f32(rng, S0), _f32(rng, S0, S1), _f32(rng, S1),
            _f32(rng, S1, S2), _f32(rng, S2))


def _init_conv2d(rng, N, C_in, C_out, K, H, W):
    return _f32(rng, N, H, W, C_in), _f32(rng, K, K, C_in, C_out), _f32(rng, C_out)


def _init_lenet(rng, N, H, W):
    H2, W2 = ((H - 4) // 2 - 4) // 2, ((W - 4) // 2 - 4) // 2
    C_before_fc1 = 16 * H2 * W2
    return (_f32(rng, N, H, W, 1), _f32(rng, 5, 5, 1, 6), _f32(rng, 6), _f32(rng, 5, 5, 6, 16), _f32(rng, 16),
            _f32(rng, C_before_fc1, 120), _f32(rng, 120), _f32(rng, 120, 84), _f32(rng, 84),
            _f32(rng, 84, 10), _f32(rng, 10), N, C_before_fc1)


def _init_resnet(rng, N, W, H, C1, C2):
    return _f32(rng, N, H, W, C1), _f32(rng, 1, 1, C1, C2), _f32(rng, 3, 3, C2, C2), _f32(rng, 1, 1, C2, C1)


F = "dl"
KERNELS = [
    kernel("softmax", softmax, _init_softmax, {"T": dict(N=2, H=3, SM=4), "S": dict(N=16, H=16, SM=128),
                                               "M": dict(N=32, H=8, SM=256)}, family=F),
    kernel("mlp", mlp, _init_mlp, {"T": dict(C_in=3, N=2, S0=5, S1=6, S2=4),
                                   "S": dict(C_in=3, N=8, S0=30000, S1=2000, S2=2000),
                                   "M": dict(C_in=3, N=8, S0=30000, S1=10000, S2=10000)}, family=F),
    kernel("conv2d_bias", conv2d_bias, _init_conv2d, {"T": dict(N=2, C_in=2, C_out=3, K=2, H=4, W=5),
                                                      "S": dict(N=8, C_in=3, C_out=16, K=2, H=32, W=32),
                                                      "M": dict(N=8, C_in=3, C_out=8, K=5, H=64, W=64)}, family=F),
    kernel("lenet", lenet5, _init_lenet, {"T": dict(N=2, H=16, W=16), "S": dict(N=4, H=28, W=28),
                                          "M": dict(N=8, H=56, W=56)}, family=F),
    kernel("resnet", resnet_basicblock, _init_resnet, {"T": dict(N=2, W=3, H=4, C1=3, C2=2),
                                                       "S": dict(N=8, W=14, H=14, C1=32, C2=8),
                                                       "M": dict(N=8, W=28, H=28, C1=64, C2=16)}, family=F),
]
