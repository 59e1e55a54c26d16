"""The router in front of a simulated fleet, the top layer above the engines: its routing policy,
the split of a decode engine's requests across a prefill engine, and its journal (``_router``);
the frontends it can stand in for are its sub-packages (``dynamo``)."""
