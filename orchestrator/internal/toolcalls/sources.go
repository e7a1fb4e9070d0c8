package toolcalls

// CodeSourceAdditionDenied refuses task_add_sources under its workspace's
// deny policy; the message names the repositories and says to ask a
// person (ADR 0013).
const CodeSourceAdditionDenied = "source_addition_denied"
