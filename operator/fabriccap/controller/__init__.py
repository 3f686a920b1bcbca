"""The live operator: informers, the fact store, the publisher, metrics and the kopf frame."""
