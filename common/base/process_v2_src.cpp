// The compiled part of Boost.Process v2: in 1.81 its header-only mode leaves a symbol
// undefined, so exactly one translation unit includes its sources (see common/base/subprocess.h).
#include <boost/process/v2/src.hpp>
