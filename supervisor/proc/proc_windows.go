package proc

import (
	"fmt"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// sysProcess holds the job object the process runs in. The server's handle
// to it is the process's leash: when the handle closes, because the server
// released it or because the server died and Windows closed it, the job
// kills what it holds (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE).
type sysProcess struct{ job windows.Handle }

func (s sysProcess) release() {
	if s.job != 0 {
		_ = windows.CloseHandle(s.job)
	}
}

func sysProcAttr(Options) *syscall.SysProcAttr {
	// A new process group without a console window: console events (Ctrl-C,
	// Ctrl-Break, closing the console) reach the server alone, which then
	// stops its workers in order.
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW}
}

// afterStart puts the process into a job of its own. os/exec cannot create a
// process inside a job, so the process runs a moment before it is assigned:
// a Deno worker starts no processes of its own (--deny-run), so none can
// escape the job in that moment, and the portable rule covers a server that
// dies in it.
func afterStart(cmd *exec.Cmd, o Options) (sysProcess, error) {
	if o.PortableOnly && o.MemoryLimit == 0 {
		return sysProcess{}, nil
	}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return sysProcess{}, fmt.Errorf("create job object: %w", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if !o.PortableOnly {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	}
	if o.MemoryLimit > 0 {
		// The kernel fails allocations past the cap, so the worker dies of
		// it at once instead of between two polls of its memory.
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		info.JobMemoryLimit = uintptr(o.MemoryLimit)
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return sysProcess{}, fmt.Errorf("set job limits: %w", err)
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		_ = windows.CloseHandle(job)
		return sysProcess{}, fmt.Errorf("open process: %w", err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		_ = windows.CloseHandle(job)
		return sysProcess{}, fmt.Errorf("assign to job object: %w", err)
	}
	return sysProcess{job: job}, nil
}

// describeExit names the exit code; codes from 0xC0000000 up are NTSTATUS
// values of a crash (0xC0000005 an access violation, 0xC0000017 out of
// memory), easier to look up in hexadecimal.
func describeExit(ee *exec.ExitError) string {
	code := uint32(ee.ExitCode())
	if code >= 0xC0000000 {
		return fmt.Sprintf("exit status 0x%08X", code)
	}
	return fmt.Sprintf("exit status %d", code)
}
