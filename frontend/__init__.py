"""From PyTorch to the torch dialect: the torch.compile backend and the FX importer."""
