"""Building the embedder and the relation extractor from the settings."""

from memory.providers.embedders import make_embedder
from memory.providers.extractors import make_extractor

__all__ = ["make_embedder", "make_extractor"]
