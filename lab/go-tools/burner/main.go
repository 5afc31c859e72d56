// burner puts real, known load on a node of the lab's real-node cluster (lab/realnodes.py):
// it burns a set amount of CPU and holds a set amount of memory, so what metrics-server reads
// from the pod's cgroup (and loadwise then scores) is load the test chose, not a stand-in's
// figure. It runs as a pod from a FROM-scratch image, so it is one static binary with no
// dependencies beyond the standard library. Written for the lab.
//
//	burner [-cpu MILLICORES] [-memory MIB] [-period DURATION] [-v]
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// touchEvery is how often the main loop re-writes one byte of every page it holds: the
// buffer stays reachable (the GC cannot free it) and every page stays recently used.
const touchEvery = 5 * time.Second

// pageSize is the smallest page on the platforms the lab runs (amd64, arm64 with 4 KiB
// pages); writing one byte in each such page makes all of the buffer resident.
const pageSize = 4096

func main() {
	cpu := flag.Int("cpu", 0, "CPU to burn, in millicores (300 = 0.3 of one core; above 1000 shared evenly by ceil(N/1000) threads)")
	memory := flag.Int("memory", 0, "memory to hold resident, in MiB")
	period := flag.Duration("period", 100*time.Millisecond, "duty-cycle period: each thread spins for its share of it (in CPU time) and sleeps the rest")
	version := flag.Bool("v", false, "print the version and exit")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: burner [-cpu MILLICORES] [-memory MIB] [-period DURATION] [-v]")
		flag.PrintDefaults()
	}
	flag.Parse() // a malformed value: the flag package names the flag and exits 2
	if *version {
		fmt.Println("loadwise-lab burner")
		return
	}
	switch {
	case *cpu < 0:
		usageError("-cpu must be >= 0 millicores, got %d", *cpu)
	case *memory < 0:
		usageError("-memory must be >= 0 MiB, got %d", *memory)
	case *memory > math.MaxInt>>20:
		usageError("-memory %d MiB does not fit in this machine's address space", *memory)
	case *period <= 0:
		usageError("-period must be > 0, got %s", *period)
	case flag.NArg() > 0:
		usageError("unexpected argument %q (values go after a flag: -cpu 300)", flag.Arg(0))
	}

	// The kubelet stops a pod with SIGTERM: end at once with status 0, even while the memory
	// is still being written, so a deleted pod is gone before its grace period is. Without
	// the handler the Go runtime would still end, but as PID 1 of the container, where the
	// kernel ignores the re-raised default signal, with status 2 (runtime.dieFromSignal's
	// fallback), which reads as a failure.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		os.Exit(0)
	}()

	held := hold(*memory)
	threads := burn(*cpu, *period)
	plural := "s"
	if threads == 1 {
		plural = ""
	}
	fmt.Printf("burner: burning %dm CPU (%d thread%s, period %s), holding %d MiB\n", *cpu, threads, plural, *period, *memory)

	for range time.Tick(touchEvery) {
		for i := 0; i < len(held); i += pageSize {
			held[i]++
		}
	}
}

func usageError(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "burner: "+format+"\n", args...)
	os.Exit(2)
}

// hold allocates mib MiB and writes to every page of it. make returns zeroed memory that,
// for an allocation this large, comes straight from fresh mmap'd pages the kernel has not
// backed yet: without the writes the pages would not count in RSS or the cgroup's usage.
func hold(mib int) []byte {
	buf := make([]byte, mib<<20)
	for i := 0; i < len(buf); i += pageSize {
		buf[i] = 1
	}
	return buf
}

// burn starts ceil(millicores/1000) threads that share millicores evenly (1500 -> two at
// 750m: one thread can burn at most one core) and returns how many it started.
func burn(millicores int, period time.Duration) int {
	if millicores == 0 {
		return 0
	}
	n := (millicores + 999) / 1000
	// Each burner holds a P while it spins; leave one for the main loop and signals. The
	// default GOMAXPROCS is the CPU count, since Go 1.25 lowered to the container's CPU
	// limit (rounded up, at least 2: runtime/cgroup_linux.go); either can be below n+1.
	if runtime.GOMAXPROCS(0) < n+1 {
		runtime.GOMAXPROCS(n + 1)
	}
	for i := range n {
		share := millicores / n
		if i < millicores%n {
			share++
		}
		busy := period * time.Duration(share) / 1000
		// Staggered starts spread the threads' busy slices over the period, so the load
		// is smooth instead of all threads spinning at the same moment.
		go spin(busy, period, period*time.Duration(i)/time.Duration(n))
	}
	return n
}

// spin busy-loops until its thread has used busy of CPU time, once every period. The busy
// slice is measured on the thread's own CPU clock, not as a loop count (the average is
// right on any machine's speed) and not on the wall clock: on a shared machine (the lab's
// has 2 cores, with the control plane, the nodes and test workers on them) the spinning
// thread is often descheduled, and a wall-clock slice then burns less than asked (measured
// here: 0.16-0.27 cores for -cpu 300 while other programs used 1.1-1.8 of the 2 cores; on
// the thread clock 0.30). The schedule is on the wall clock (start + k*period).
func spin(busy, period, offset time.Duration) {
	// One goroutine per OS thread: the thread's CPU clock is the burner's alone, and the
	// runtime cannot move the spinning onto the thread that runs the main loop.
	runtime.LockOSThread()
	next := time.Now().Add(offset)
	time.Sleep(time.Until(next))
	for {
		start := next
		for c0 := threadCPU(); threadCPU()-c0 < busy; {
		}
		next = start.Add(period)
		if now := time.Now(); next.Before(now) {
			// The slice took longer than a period (a busy machine): start afresh rather
			// than spin back-to-back to catch up, so a thread never exceeds its share.
			next = now
		}
		time.Sleep(time.Until(next))
	}
}

// clockThreadCPUTimeID is CLOCK_THREAD_CPUTIME_ID (linux/time.h), which the syscall
// package does not export: the CPU time the calling thread has used.
const clockThreadCPUTimeID = 3

// threadCPU returns the CPU time the calling OS thread has used (clock_gettime(2); the
// vDSO does not serve this clock, so it is a real system call, well under a microsecond).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}
