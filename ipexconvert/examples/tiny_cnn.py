"""`tiny-cnn`: a one-block-per-stage ResNet on 64x64 images, small enough for fast tests."""

from __future__ import annotations

import torch

from .resnet import ResNet, image_inputs, resnet

IMAGE_SIZE = 64


def build_tiny_cnn() -> ResNet:
    return resnet([1, 1, 1, 1], num_classes=10, width=16, seed=1)


def tiny_cnn_inputs(batch_size: int) -> dict[str, torch.Tensor]:
    return image_inputs(batch_size, IMAGE_SIZE, seed=1)
