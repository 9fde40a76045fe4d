"""Whole models as PyTorch modules with random weights, for ``benchmarks/models_e2e.py`` and
``heronlike model tune benchmarks/models/torch_nets.py:resnet50``.

* ResNet-50 (He et al., CVPR'16): torchvision's architecture (v1.5: stride on the 3x3 conv of
  each bottleneck) written out in plain PyTorch, since PyPI's torchvision does not import beside
  the CPU build of torch 2.13. Batch norms are folded into the convolutions by TVM's
  ``DecomposeOpsForInference`` + ``FoldConstant`` (eval mode).
* BERT-base (Devlin et al., 2019): ``transformers.BertModel`` with its default configuration
  (12 layers, hidden 768, 12 heads, intermediate 3072), random weights, sequence 128; the
  output is the last hidden state.

Each function returns ``(module, example_args)``, the form ``MODULE:FUNCTION`` takes on the
command line.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        return torch.relu(self.bn3(self.conv3(y)) + identity)


class ResNet50(nn.Module):
    """torchvision's ``resnet50`` (layers 3, 4, 6, 3; 1000 classes)."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)
        for m in self.modules():  # torchvision's init, so activations stay in range
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def resnet50(batch: int = 1) -> tuple[nn.Module, tuple[Any, ...]]:
    torch.manual_seed(0)
    return ResNet50().eval(), (torch.randn(batch, 3, 224, 224),)


class _BertLastHidden(nn.Module):
    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids).last_hidden_state


def bert_base(batch: int = 1, seq: int = 128) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(attn_implementation="eager")
    model = _BertLastHidden(BertModel(config).eval()).eval()
    ids = torch.randint(0, config.vocab_size, (batch, seq), dtype=torch.int64)
    return model, (ids,)


MODELS = {"resnet50": resnet50, "bert": bert_base}
