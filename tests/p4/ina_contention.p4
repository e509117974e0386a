/* ina.p4 with only 4 aggregators, so that concurrent fragments collide and the
 * busy-aggregator path (pass on to s_d, then to the PS) carries real traffic.
 * Driven by tests/test_ina_network.py::test_aggregator_contention. */
#define NUM_AGGREGATORS 4
#include "../../p4src/ina.p4"
