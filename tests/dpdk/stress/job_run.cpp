// A job of an epoch: its chunk map, values, model and progress (see job_run.hpp).
#include "job_run.hpp"

namespace phub::stress {

JobRun::JobRun(uint64_t seed, uint64_t epoch, uint32_t index_in_epoch, const JobShape& job_shape, uint16_t lcores)
    : index(index_in_epoch),
      shape(job_shape),
      layout(layout_of(job_shape.job, lcores)),
      values(seed, epoch, job_shape),
      model(job_shape, layout, values),
      progress(layout, job_shape.job.workers) {
  if (!shape.job.secret.empty()) key = proto::derive_key(shape.job.secret, shape.job.id);
}

}  // namespace phub::stress
