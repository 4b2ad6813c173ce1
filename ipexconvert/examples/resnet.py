"""ResNet (bottleneck variant) written with plain torch.nn, plus the `resnet50` example.

torchvision is not available, so the architecture is spelled out here. Weights are random
but chosen so that BatchNorm folding and numerics are genuinely exercised:
- gamma/beta are random (not 1/0), the last BN of each block uses gamma in [0.2, 0.5]
  (not zero, which would silently skip the residual branch and hide bugs);
- running mean/var are calibrated on a random batch, so they are non-trivial per channel
  and keep activations at a sane scale through all 50 layers.
"""

from __future__ import annotations

import torch
from torch import nn

IMAGE_SIZE = 224
# Small inputs are enough to calibrate BN statistics; a 224x224 batch would slow down build().
_CALIBRATION_SHAPE = (4, 3, 64, 64)


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride) -> 1x1 expand, with a residual connection."""

    expansion = 4

    def __init__(self, in_channels: int, mid_channels: int, stride: int = 1):
        super().__init__()
        out_channels = mid_channels * self.expansion
        self.conv1 = nn.Conv2d(in_channels, mid_channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, mid_channels, 3, stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_channels)
        self.conv3 = nn.Conv2d(mid_channels, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers: list[int], num_classes: int = 1000, width: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        in_channels = width
        for index, num_blocks in enumerate(layers):
            mid_channels = width * 2**index
            stride = 1 if index == 0 else 2
            blocks = []
            for block_index in range(num_blocks):
                blocks.append(Bottleneck(in_channels, mid_channels, stride if block_index == 0 else 1))
                in_channels = mid_channels * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        # Named layer1..layer4 like the usual ResNet so state-dict keys look familiar.
        for index, stage in enumerate(stages, start=1):
            self.add_module(f"layer{index}", stage)
        self.num_stages = len(stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(pixel_values))))
        for index in range(1, self.num_stages + 1):
            x = getattr(self, f"layer{index}")(x)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def _init_weights(model: ResNet) -> None:
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.uniform_(module.weight, 0.7, 1.3)
            nn.init.normal_(module.bias, 0.0, 0.1)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.05)
            nn.init.normal_(module.bias, 0.0, 0.1)
    for module in model.modules():
        if isinstance(module, Bottleneck):
            nn.init.uniform_(module.bn3.weight, 0.2, 0.5)


@torch.no_grad()
def _calibrate_batchnorm(model: ResNet) -> None:
    """Fill running stats from one train-mode pass over a random batch (cumulative average)."""
    batchnorms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in batchnorms:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    model(torch.randn(_CALIBRATION_SHAPE))
    for bn in batchnorms:
        bn.momentum = 0.1
    model.eval()


def resnet(layers: list[int], num_classes: int = 1000, width: int = 64, seed: int = 0) -> ResNet:
    """Build a seeded, BN-calibrated bottleneck ResNet in eval mode."""
    with torch.random.fork_rng(devices=[]):  # keep the caller's global RNG untouched
        torch.manual_seed(seed)
        model = ResNet(layers, num_classes, width)
        _init_weights(model)
        _calibrate_batchnorm(model)
    return model.eval()


def build_resnet50() -> ResNet:
    return resnet([3, 4, 6, 3], num_classes=1000, width=64)


def image_inputs(batch_size: int, image_size: int = IMAGE_SIZE, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random normalized images (roughly what an ImageNet preprocessing pipeline produces)."""
    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
    return {"pixel_values": pixels}


def resnet50_inputs(batch_size: int) -> dict[str, torch.Tensor]:
    return image_inputs(batch_size, IMAGE_SIZE)
