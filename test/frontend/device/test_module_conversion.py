"""`Module.to("neuron")` and back keep a parameter held by two modules one parameter, so a model with tied
weights (a language model's token embedding and output projection) trains as on the CPU."""

import copy

import torch
import torch.nn.functional as F
from support import assert_close_to_torch

VOCAB, WIDTH, TOKENS = 24, 8, (2, 6)


class _TiedLanguageModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(tokens)))


def test_conversions_to_and_from_the_device_keep_tied_weights_tied():
    model = _TiedLanguageModel().to("neuron")
    assert model.head.weight is model.embed.weight
    assert model.embed.weight.device.type == "neuron"
    assert len(list(model.parameters())) == 3
    back = model.cpu()
    assert back.head.weight is back.embed.weight
    assert back.embed.weight.device.type == "cpu"
    again = model.neuron()  # type: ignore[operator]  # torch generates it for the renamed PrivateUse1 device
    assert again.head.weight is again.embed.weight


def test_a_tied_model_trains_on_the_device_as_on_the_cpu():
    torch.manual_seed(0)
    cpu_model = _TiedLanguageModel()
    device_model = copy.deepcopy(cpu_model).to("neuron")
    tokens = torch.randint(0, VOCAB, TOKENS)
    for model, device in ((cpu_model, "cpu"), (device_model, "neuron")):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(2):
            optimizer.zero_grad()
            logits = model(tokens.to(device))
            F.cross_entropy(logits.reshape(-1, VOCAB), tokens.to(device).reshape(-1)).backward()
            optimizer.step()
    for (name, expected), got in zip(cpu_model.named_parameters(), device_model.parameters(), strict=True):
        assert_close_to_torch(got.detach().cpu(), expected.detach(), name)
