"""The one composition root: builds pools, brokers, providers and HTTP clients for every process."""
