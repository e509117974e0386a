"""gradnet at data-centre scale in ns-3: the emulator's topologies, placement
policies and schemes (PS, ring all-reduce, INA) as an ns-3 simulation.

ns-3 is an optional dependency (``pip install -e '.[sim]'``, the PyPI ``ns3`` wheel);
:func:`sim.ns3env.available` says whether it can be imported and :func:`sim.ns3env.load`
raises :class:`sim.ns3env.Ns3Missing` with the install hint when it cannot.
See docs/simulation.md.
"""

from .ns3env import Ns3Missing, available

__all__ = ["Ns3Missing", "available"]
