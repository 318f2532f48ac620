// mk-consumer [MANIFEST | --compile SPEC DIR]: links the installed runtime
// (find_package(megakernel)) and reads a kernel's manifest with it, as an
// application embedding the runtime would before binding weights and
// launching (which needs a GPU). Built against an installation with the
// `jit` component (megakernel::jit), `--compile SPEC DIR` first compiles the
// spec in process into DIR (mk_jit.h) and reads that kernel's manifest.
#include "mk/runtime/Manifest.h"
#include "mk/runtime/mk.h"
#ifdef MK_CONSUMER_JIT
#include "mk_jit.h"
#endif

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char **argv) {
  std::printf("megakernel runtime C API version %d\n", mk_api_version());
  if (argc < 2)
    return 0;
  std::string path = argv[1];
  if (path == "--compile") {
#ifdef MK_CONSUMER_JIT
    if (argc < 4) {
      std::fprintf(stderr, "usage: mk-consumer --compile SPEC DIR\n");
      return 2;
    }
    std::ifstream spec(argv[2]);
    std::stringstream st;
    st << spec.rdbuf();
    if (mk_jit_compile_spec(st.str().c_str(), argv[3], nullptr, 0) != 0) {
      std::fprintf(stderr, "mk-consumer: %s\n", mk_jit_last_error());
      return 1;
    }
    std::printf("compiled in process with megakernel %s\n", mk_jit_version());
    path = std::string(argv[3]) + "/mk_tiny.manifest.json";
#else
    std::fprintf(stderr, "mk-consumer: built without megakernel::jit\n");
    return 2;
#endif
  }
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "mk-consumer: cannot open %s\n", path.c_str());
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
