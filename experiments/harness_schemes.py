"""The schemes the time-to-accuracy harness knows, and which run by default."""

#: Differentiated transmission's variants, on request (``experiments/train_differentiated.py``).
DIFF_VARIANTS = ("differentiated-reliable", "differentiated-ef", "differentiated-random-ef",
                 "differentiated-topk-ef")
#: Every scheme the harness knows (``controller.registry.SCHEMES`` holds the same set).
ALL_SCHEMES = ("ps", "ring", "ina", "ndn", "bml", "rail_ring", "rail_sharded_ps", "token",
               "differentiated", "gloo", "ndn-ipmc", "ndn-tcp", *DIFF_VARIANTS)
BUILTIN_SCHEMES = ("gloo", "ps", "ina", "ring", "bml", "rail_ring", "rail_sharded_ps")
P4_PROGRAM = {"gloo": "forward.p4", "ps": "ina.p4 (no aggregator used)", "ina": "ina.p4",
              "ring": "forward.p4", "bml": "forward.p4", "rail_ring": "forward.p4",
              "rail_sharded_ps": "forward.p4"}
#: BML's same-NIC-count baselines: k concurrent rings or sharded PSs on a k-rail network.
RAIL_SCHEMES = ("rail_ring", "rail_sharded_ps")
#: What runs without ``--scheme``. On request only: the k-rail baselines
#: (``--scheme bml,rail_ring,rail_sharded_ps``), NDN's IP-multicast and TCP baselines
#: (ndn-ipmc, ndn-tcp) and differentiated's variants (all-reliable, error feedback,
#: block selection).
DEFAULT_SCHEMES = tuple(s for s in ALL_SCHEMES
                        if s not in (*RAIL_SCHEMES, "ndn-ipmc", "ndn-tcp", *DIFF_VARIANTS))
#: Schemes that sum through hosts.bml.collective with a plan file.
COLLECTIVE_SCHEMES = ("ring", "bml", *RAIL_SCHEMES)
