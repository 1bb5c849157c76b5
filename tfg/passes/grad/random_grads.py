"""The random ops' gradients: none flows through them (TensorFlow's random_grad.py and
stateless_random_ops.py mark them NotDifferentiable). The seeds, keys, counters and shapes
they take are integers, so the key-counter ops (which TensorFlow leaves unregistered) are
marked too: a gradient through them is zero, never an error."""
from tfg.passes.grad.registry import no_gradient

no_gradient("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal",
            "StatelessRandomUniformInt", "StatelessRandomUniformV2", "StatelessRandomNormalV2",
            "StatelessTruncatedNormalV2", "StatelessRandomUniformIntV2",
            "StatelessRandomUniformFullIntV2", "StatelessMultinomial",
            "StatelessRandomGetKeyCounter", "StatelessRandomGetAlg",
            "StatelessRandomGetKeyCounterAlg", "Multinomial")
