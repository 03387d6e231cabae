"""Train an MLP on MNIST with thunder: the MNIST tutorial of the docs as a program.

    python examples/mnist/train.py --epochs 1                      # real MNIST if torchvision imports
    python examples/mnist/train.py --epochs 1 --data synthetic --train-size 512 --test-size 128

With ``--data auto`` (the default) the real data set is downloaded through torchvision into
``--data-dir``; where torchvision does not import or there is no network, a small generated data set of
MNIST's shape is used instead (noise images whose label brightens one band of pixels, so there is
something to learn). The model is torchvision's ``ops.MLP`` where torchvision imports, else the same
layers built from ``torch.nn``.
"""

from __future__ import annotations

import argparse
import sys

import torch

import thunder


def build_mlp(in_channels: int, hidden_channels: list[int], dropout: float) -> torch.nn.Module:
    """torchvision.ops.MLP, or the same layers: Linear, ReLU, Dropout per hidden layer; Linear, Dropout."""
    try:
        import torchvision

        return torchvision.ops.MLP(in_channels, hidden_channels, bias=True, dropout=dropout)
    except Exception:  # torchvision absent, or present but not importable (its CPU wheels need CUDA)
        layers: list[torch.nn.Module] = []
        for n_in, n_out in zip([in_channels, *hidden_channels[:-2]], hidden_channels[:-1]):
            layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
        layers += [torch.nn.Linear(hidden_channels[-2], hidden_channels[-1]), torch.nn.Dropout(dropout)]
        return torch.nn.Sequential(*layers)


def synthetic_mnist(size: int, seed: int) -> torch.utils.data.Dataset:
    """Flattened 28x28 images in [0, 1]; label c brightens the c-th band of 78 pixels."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (size,), generator=generator)
    images = torch.rand(size, 784, generator=generator) * 0.5
    images += 0.5 * ((torch.arange(784) // 78)[None, :] == labels[:, None])
    return torch.utils.data.TensorDataset(images, labels)


def real_mnist(data_dir: str, train: bool) -> torch.utils.data.Dataset:
    """torchvision's MNIST, downloaded on first use, as flattened float tensors."""
    import torchvision
    import torchvision.transforms as transforms

    flatten = transforms.Lambda(lambda t: t.flatten())
    transform = transforms.Compose((transforms.ToTensor(), flatten))
    folder = f"{data_dir}/{'train' if train else 'test'}"
    return torchvision.datasets.MNIST(folder, train=train, download=True, transform=transform)


def load_data(kind: str, data_dir: str, train_size: int, test_size: int) -> tuple:
    if kind in ("auto", "mnist"):
        try:
            train, test = real_mnist(data_dir, True), real_mnist(data_dir, False)
            print(f"data: MNIST from {data_dir}")
        except Exception as error:
            if kind == "mnist":
                raise
            print(f"data: generated (real MNIST unavailable: {type(error).__name__}: {error})")
            train, test = (
                synthetic_mnist(train_size or 2048, seed=0),
                synthetic_mnist(test_size or 512, seed=1),
            )
    else:
        print("data: generated")
        train, test = synthetic_mnist(train_size or 2048, seed=0), synthetic_mnist(test_size or 512, seed=1)
    if train_size and len(train) > train_size:
        train = torch.utils.data.Subset(train, range(train_size))
    if test_size and len(test) > test_size:
        test = torch.utils.data.Subset(test, range(test_size))
    return train, test


def evaluate(net: torch.nn.Module, loader: torch.utils.data.DataLoader, device: str) -> float:
    correct = total = 0
    for data, targets in loader:
        guesses = torch.argmax(net(data.to(device)), 1)
        correct += torch.eq(targets.to(device), guesses).sum().item()
        total += len(targets)
    return correct / total


def train(net: torch.nn.Module, loader: torch.utils.data.DataLoader, device: str, epochs: int) -> float:
    loss_fn = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(net.parameters())
    loss = torch.tensor(0.0)
    for epoch in range(epochs):
        for data, targets in loader:
            loss = loss_fn(net(data.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch + 1}: last loss {loss.item():.4f}")
    return loss.item()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--data", choices=("auto", "mnist", "synthetic"), default="auto")
    parser.add_argument("--data-dir", default="/tmp/mnist")
    parser.add_argument(
        "--train-size",
        type=int,
        default=0,
        help="use at most this many training images (0: all; generated data: 2048)",
    )
    parser.add_argument(
        "--test-size",
        type=int,
        default=0,
        help="use at most this many test images (0: all; generated data: 512)",
    )
    parser.add_argument(
        "--hidden",
        type=int,
        nargs="+",
        default=[784, 784, 784, 28, 10],
        help="torchvision MLP hidden_channels",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--print-traces", action="store_true", help="print the execution traces at the end")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    train_set, test_set = load_data(args.data, args.data_dir, args.train_size, args.test_size)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.batch_size)

    net = build_mlp(784, args.hidden, dropout=0.1).to(args.device)

    # Two compiled modules sharing the parameters: one for evaluation (no gradients), one for training.
    net.eval().requires_grad_(False)
    compiled_eval_net = thunder.compile(net)
    print(f"accuracy before training: {evaluate(compiled_eval_net, test_loader, args.device):.1%}")

    net.train().requires_grad_(True)
    compiled_train_net = thunder.compile(net)
    train(compiled_train_net, train_loader, args.device, args.epochs)
    net.eval().requires_grad_(False)

    accuracy = evaluate(compiled_eval_net, test_loader, args.device)
    print(f"accuracy after training: {accuracy:.1%}")
    print(
        f"accuracy of the uncompiled module (same parameters): {evaluate(net, test_loader, args.device):.1%}"
    )

    if args.print_traces:
        fwd_traces, bwd_traces = thunder.last_traces(compiled_train_net)
        print("training forward execution trace:", fwd_traces[-1], sep="\n")
        print("training backward execution trace:", bwd_traces[-1], sep="\n")
        print("evaluation execution trace:", thunder.last_traces(compiled_eval_net)[-1], sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
