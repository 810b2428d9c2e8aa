import NIOCore

/// One timer per connection for all its calls' deadlines, armed for the earliest one.
///
/// Scheduling and cancelling a timer per call costs more than the rest of a small call; here a
/// call whose deadline is not the earliest costs a comparison. When the timer fires, the owner
/// expires every call that is due and re-arms for the next deadline (see `rearm`).
/// Used only on its connection's event loop.
struct EarliestDeadlineTimer {
    private var armed: (deadline: NIODeadline, task: Scheduled<Void>)?

    /// Makes sure the timer fires no later than `deadline`.
    mutating func schedule(_ deadline: NIODeadline, on eventLoop: any EventLoop, fire: @escaping @Sendable () -> Void) {
        if let armed, armed.deadline <= deadline { return }
        armed?.task.cancel()
        armed = (deadline, eventLoop.scheduleTask(deadline: deadline, fire))
    }

    /// Call first thing when the timer fired.
    mutating func fired() {
        armed = nil
    }

    mutating func cancel() {
        armed?.task.cancel()
        armed = nil
    }
}
