// Graph passes.
namespace coil {}
