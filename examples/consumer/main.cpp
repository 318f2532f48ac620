// mk-consumer [MANIFEST]: links the installed runtime (find_package(megakernel))
// and reads a kernel's manifest with it, as an application embedding the
// runtime would before binding weights and launching (which needs a GPU).
#include "mk/runtime/Manifest.h"
#include "mk/runtime/mk.h"

#include <cstdio>
#include <fstream>
#include <sstream>

int main(int argc, char **argv) {
  std::printf("megakernel runtime C API version %d\n", mk_api_version());
  if (argc < 2)
    return 0;
  std::ifstream f(argv[1]);
  if (!f) {
    std::fprintf(stderr, "mk-consumer: cannot open %s\n", argv[1]);
    return 1;
  }
  std::stringstream text;
  text << f.rdbuf();
  mk::rt::Manifest m;
  mk::rt::Status s = mk::rt::parseManifest(text.str(), m);
  if (!s.isOk()) {
    std::fprintf(stderr, "mk-consumer: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("kernel %s: %lld phases, %lld grid barriers, %zu parameters\n", m.kernel.c_str(),
              (long long)m.phases, (long long)m.gridBarriers, m.params.size());
  return 0;
}
