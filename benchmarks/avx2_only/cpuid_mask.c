/* LD_PRELOAD shim: the process (and its children) see this x86-64 CPU without AVX-512, AMX or
 * AVX-VNNI, as an AVX2-only CPU (Zen 3, Haswell to Alder Lake) would describe itself.
 *
 * Why: issue 17 asks for the six workloads on an AVX2-only CPU, and the machines at hand have
 * AVX-512. Every library in a `tfcheck bench` run picks its kernels from CPUID: XNNPACK (through
 * cpuinfo), oneDNN (xbyak), XLA and TVM (LLVM's host detection), NumPy. With CPUID faulting
 * (Linux's arch_prctl(ARCH_SET_CPUID, 0), the `cpuid_fault` flag in /proc/cpuinfo), each CPUID
 * instruction raises SIGSEGV; the handler here runs the real CPUID with faulting briefly off,
 * clears the AVX-512 family's bits, and resumes after the instruction. The memory hierarchy and
 * clock stay the machine's own: this models an AVX2-only instruction set, not another CPU.
 *
 * The setting is per thread, inherited by threads and forks, reset by execve (the preload sets it
 * again in the new program). A SIGSEGV handler the program installs (Python's faulthandler) is
 * kept behind this one: `sigaction` and `signal` for SIGSEGV are answered here, and faults that
 * are not CPUID go to the program's handler, or end the process as they would have.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

/* Leaf 7 subleaf 0: EBX AVX512F, DQ, IFMA, PF, ER, CD, BW, VL; ECX VBMI, VBMI2, VNNI, BITALG,
 * VPOPCNTDQ; EDX 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512-FP16, AMX-TILE, AMX-INT8. */
static const uint32_t LEAF7_EBX = BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31);
static const uint32_t LEAF7_ECX = BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14);
static const uint32_t LEAF7_EDX = BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25);
/* Leaf 7 subleaf 1: EAX AVX-VNNI, AVX512-BF16, AMX-FP16; EDX AVX10. */
static const uint32_t LEAF7_1_EAX = BIT(4) | BIT(5) | BIT(21);
static const uint32_t LEAF7_1_EDX = BIT(19);
/* Leaf 0xD subleaf 0: XSAVE state components opmask, ZMM_Hi256, Hi16_ZMM, AMX XTILECFG, XTILEDATA. */
static const uint32_t XSAVE_EAX = BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18);

static struct sigaction program_handler; /* what the program asked SIGSEGV to do */
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

static void real_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t out[4]) {
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __asm__ volatile("cpuid" : "=a"(out[0]), "=b"(out[1]), "=c"(out[2]), "=d"(out[3]) : "a"(leaf), "c"(subleaf));
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
}

static void mask(uint32_t leaf, uint32_t subleaf, uint32_t regs[4]) {
    if (leaf == 7 && subleaf == 0) {
        regs[1] &= ~LEAF7_EBX;
        regs[2] &= ~LEAF7_ECX;
        regs[3] &= ~LEAF7_EDX;
    } else if (leaf == 7 && subleaf == 1) {
        regs[0] &= ~LEAF7_1_EAX;
        regs[3] &= ~LEAF7_1_EDX;
    } else if (leaf == 0xD && subleaf == 0) {
        regs[0] &= ~XSAVE_EAX;
    } else if (leaf == 0x24) { /* AVX10 leaf */
        regs[0] = regs[1] = regs[2] = regs[3] = 0;
    }
}

static void pass_on(int signal, siginfo_t *info, void *context) {
    if (program_handler.sa_flags & SA_SIGINFO) {
        program_handler.sa_sigaction(signal, info, context);
    } else if (program_handler.sa_handler != SIG_DFL && program_handler.sa_handler != SIG_IGN) {
        program_handler.sa_handler(signal);
    } else { /* the default action: returning re-runs the faulting instruction, which now kills */
        struct sigaction fallback = {.sa_handler = SIG_DFL};
        real_sigaction(SIGSEGV, &fallback, NULL);
        if (info->si_code <= 0) { /* sent by kill or raise (run.py ending as its command did): no */
            raise(signal);        /* instruction to re-run, so send it again, now to the default */
        }
    }
}

static void on_segv(int signal, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *gregs = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)gregs[REG_RIP];
    /* A CPUID fault is sent by the kernel (SI_KERNEL), with the instruction pointer on it. */
    if (info->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
        pass_on(signal, info, context);
        return;
    }
    uint32_t regs[4], leaf = (uint32_t)gregs[REG_RAX], subleaf = (uint32_t)gregs[REG_RCX];
    real_cpuid(leaf, subleaf, regs);
    mask(leaf, subleaf, regs);
    gregs[REG_RAX] = regs[0];
    gregs[REG_RBX] = regs[1];
    gregs[REG_RCX] = regs[2];
    gregs[REG_RDX] = regs[3];
    gregs[REG_RIP] += 2;
}

int sigaction(int signal, const struct sigaction *action, struct sigaction *old) {
    if (signal != SIGSEGV) {
        return real_sigaction(signal, action, old);
    }
    if (old) {
        *old = program_handler;
    }
    if (action) {
        program_handler = *action;
    }
    return 0;
}

sighandler_t signal(int signal, sighandler_t handler) {
    struct sigaction action = {.sa_handler = handler}, old;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(signal, &action, &old) == 0 ? old.sa_handler : SIG_ERR;
}

__attribute__((constructor)) static void start_masking(void) {
    real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
    program_handler.sa_handler = SIG_DFL;
    struct sigaction ours = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER};
    sigemptyset(&ours.sa_mask);
    if (real_sigaction(SIGSEGV, &ours, NULL) != 0 || syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        fprintf(stderr, "cpuid_mask: CPUID faulting is not available here (no cpuid_fault flag?)\n");
        exit(70);
    }
}
