"""The MNIST tutorial (seeds/mnist-mlp-tutorial.rst) as written, on the CPU, with synthetic data.

Only what needs a GPU or a download differs: the device is the CPU, the data set is a learnable
synthetic one of MNIST's shape, and torchvision's MLP (whose import needs CUDA here) is built
from the same torch.nn layers. The tutorial's calls are otherwise unchanged: ``thunder.compile``,
an eval pass, a training epoch with Adam, eval again, and ``thunder.last_traces`` of both modules.
"""

from __future__ import annotations

import torch

import thunder

device = "cpu"
batch_size = 8


def mlp(in_channels: int, hidden_channels: list[int], dropout: float) -> torch.nn.Sequential:
    """torchvision.ops.MLP: Linear, ReLU, Dropout per hidden layer; the last layer Linear, Dropout."""
    layers: list[torch.nn.Module] = []
    for n_in, n_out in zip([in_channels, *hidden_channels[:-2]], hidden_channels[:-1]):
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
    layers += [torch.nn.Linear(hidden_channels[-2], hidden_channels[-1]), torch.nn.Dropout(dropout)]
    return torch.nn.Sequential(*layers)


def synthetic_mnist(n: int, seed: int) -> torch.utils.data.TensorDataset:
    """Noise images of MNIST's flattened shape in [0, 1]; label c brightens the c-th band of pixels."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=generator)
    images = torch.rand(n, 784, generator=generator) * 0.5
    band = torch.arange(784) // 78
    images += 0.5 * (band[None, :] == labels[:, None])
    return torch.utils.data.TensorDataset(images, labels)


def eval_model(net: torch.nn.Module, test_loader: torch.utils.data.DataLoader) -> float:
    num_correct = 0
    total_guesses = 0
    for data, targets in iter(test_loader):
        results = net(data)
        best_guesses = torch.argmax(results, 1)
        num_correct += torch.eq(targets, best_guesses).sum().item()
        total_guesses += batch_size
    print("Correctly guessed ", (num_correct / total_guesses) * 100, "% of the dataset")
    return num_correct / total_guesses


def train_model(
    net: torch.nn.Module, train_loader: torch.utils.data.DataLoader, *, num_epochs: int = 1
) -> list[float]:
    losses = []
    loss_fn = torch.nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.Adam(net.parameters())
    for _epoch in range(num_epochs):
        for data, targets in iter(train_loader):
            results = net(data)
            loss = loss_fn(results, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def test_mnist_tutorial_program_trains_through_thunder() -> None:
    torch.manual_seed(0)
    train_dataset, test_dataset = synthetic_mnist(320, seed=0), synthetic_mnist(80, seed=1)
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=batch_size, sampler=torch.utils.data.RandomSampler(train_dataset)
    )
    test_loader = torch.utils.data.DataLoader(
        test_dataset, batch_size=batch_size, sampler=torch.utils.data.RandomSampler(test_dataset)
    )
    net = mlp(in_channels=784, hidden_channels=[784, 784, 784, 28, 10], dropout=0.1).to(device)

    net.eval().requires_grad_(False)
    compiled_eval_net = thunder.compile(net)
    accuracy_before = eval_model(compiled_eval_net, test_loader)

    net.train().requires_grad_(True)
    compiled_train_net = thunder.compile(net)
    weight_before = net[0].weight.detach().clone()
    losses = train_model(compiled_train_net, train_loader)
    net.eval().requires_grad_(False)

    accuracy_after = eval_model(compiled_eval_net, test_loader)
    accuracy_uncompiled = eval_model(net, test_loader)

    # the loss falls, the compiled and uncompiled modules share the trained parameters
    assert sum(losses[-10:]) < sum(losses[:10]), losses
    assert not torch.equal(net[0].weight, weight_before)
    assert accuracy_after > accuracy_before
    assert accuracy_after == accuracy_uncompiled

    fwd_traces, bwd_traces = thunder.last_traces(compiled_train_net)
    eval_traces = thunder.last_traces(compiled_eval_net)
    forward, backward, evaluation = str(fwd_traces[-1]), str(bwd_traces[-1]), str(eval_traces[-1])
    assert (
        forward.count("linear(") == 5 and "native_dropout" in forward
    )  # returns the mask, saved for the backward
    assert "def backward(" in backward and backward.count("matmul(") >= 5
    assert "@torch.no_grad()" in evaluation and "dropout" not in evaluation
    for trace in (fwd_traces[-1], bwd_traces[-1], eval_traces[-1]):
        compile(str(trace), "<trace>", "exec")  # prints as Python


def test_training_step_gradients_match_eager() -> None:
    torch.manual_seed(0)
    net = mlp(in_channels=784, hidden_channels=[64, 28, 10], dropout=0.0)
    compiled = thunder.compile(net)
    data, targets = torch.rand(8, 784), torch.randint(0, 10, (8,))
    torch.nn.functional.cross_entropy(compiled(data), targets).backward()
    thunder_grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    torch.nn.functional.cross_entropy(net(data), targets).backward()
    for ours, eager in zip(thunder_grads, [p.grad for p in net.parameters()]):
        torch.testing.assert_close(ours, eager)
