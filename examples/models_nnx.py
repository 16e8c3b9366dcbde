"""A flax.nnx training loop under bounded_jit: in-place updates, and what becomes of them.

Run with:  python examples/models_nnx.py
Its output is pasted into docs/models.md (a test keeps the two equal).
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from tinax.jit import TraceBudgetError, bounded_jit


def section(title):
    print(f"\n=== {title}")


class Classifier(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(4, 8, rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.dropout = nnx.Dropout(0.2, rngs=rngs)
        self.head = nnx.Linear(8, 3, rngs=rngs)

    def __call__(self, x):
        return self.head(self.dropout(jax.nn.relu(self.bn(self.linear(x)))))


TX = optax.adam(1e-2)  # one transformation, shared: a new one per optimizer is a new trace


def make():
    model = Classifier(nnx.Rngs(0, dropout=1))
    return model, nnx.Optimizer(model, TX, wrt=nnx.Param)


def train_step(model, optimizer, x, labels):
    def loss_fn(model):
        logits = model(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)  # in place: the weights and optimizer.step
    return loss


x = jax.random.normal(jax.random.key(0), (32, 4))
labels = (x[:, 0] > 0).astype(jnp.int32) + (x[:, 1] > 0).astype(jnp.int32)

section("the in-place step under the default (propagate_updates=None)")
model, optimizer = make()
try:
    bounded_jit(train_step, max_traces=1)(model, optimizer, x, labels)
except ValueError as error:
    print(f"ValueError: {error}".split("\n--------------------")[0])
print(f"optimizer.step after the refused call: {int(optimizer.step[...])}")

section("propagate_updates=True: the updates are written back, as nnx.jit does")
model, optimizer = make()
step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
for _ in range(5):
    loss = step(model, optimizer, x, labels)
    print(f"step {int(optimizer.step[...])}: loss {float(loss):.4f}")
print(f"BatchNorm mean moved: {bool(jnp.abs(model.bn.mean[...]).sum() > 0)}")
print(f"Dropout's RNG counter: {int(model.dropout.rngs.count[...])}")
print(f"traces: {step.traces_used} of max_traces={step.max_traces}")

reference_model, reference_optimizer = make()
for _ in range(5):
    nnx.jit(train_step)(reference_model, reference_optimizer, x, labels)
ours = jax.tree.leaves(nnx.state((model, optimizer), nnx.Param, nnx.BatchStat))
theirs = jax.tree.leaves(
    nnx.state((reference_model, reference_optimizer), nnx.Param, nnx.BatchStat)
)
same = all(np.allclose(a, b, atol=1e-6) for a, b in zip(ours, theirs, strict=True))
print(f"same weights and statistics as nnx.jit: {same}")

section("a functional step (it returns the objects) runs under the default")


def functional_step(model, optimizer, x, labels):
    loss = train_step(model, optimizer, x, labels)
    return model, optimizer, loss


model, optimizer = make()
functional = bounded_jit(functional_step, max_traces=1)
for _ in range(5):
    model, optimizer, loss = functional(model, optimizer, x, labels)
print(f"step {int(optimizer.step[...])}: loss {float(loss):.4f}")

section("model.eval() changes static fields: a new trace, named")
model, optimizer = make()
predict = bounded_jit(lambda model, x: model(x).argmax(-1), max_traces=1, propagate_updates=True)
predict(model, x)
model.eval()
try:
    predict(model, x)
except TraceBudgetError as error:
    print(f"TraceBudgetError: {error}".split("\n--------------------")[0])

section("a GraphDef from nnx.split: named by attribute, not by flat index")


class Tempered(nnx.Module):
    def __init__(self, temperature, rngs):
        self.linear = nnx.Linear(4, 3, rngs=rngs)
        self.temperature = temperature

    def __call__(self, x):
        return self.linear(x) / self.temperature


@bounded_jit(max_traces=1, static_argnames="graphdef")
def sample(graphdef, state, x):
    return nnx.merge(graphdef, state)(x)


graphdef, state = nnx.split(Tempered(1.0, nnx.Rngs(0)))
sample(graphdef, state, x)
graphdef, state = nnx.split(Tempered(2.0, nnx.Rngs(0)))
print(sample.explain(graphdef, state, x))
