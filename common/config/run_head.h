// RunHead: what a run's members predict, decided once from the config (or a member's task) and
// the data (run.json): a regression on T targets, a Gaussian head (one target: a mean and a
// variance per row), or K classes. Every part that needs to know asks it instead of working it
// out again: the trainer (output width, holdout metrics), checkpoints and export, predict, the
// ensemble summary, the mutation (committee score, prediction width), config validation and the
// supervisor (prediction file sizes).
//
//   kind            OutputWidth  members combine as                            default score
//   regression      T            mean of the members' predictions              std
//   gaussian        2            mixture: mean of means; aleatoric + epistemic  epistemic
//   classification  K            mean of the members' class probabilities     bald
//
// A value type; pure; thread-safe.
#pragma once

#include <string>

#include "common/config/member_options.h"
#include "common/config/run_options.h"

namespace ens {

struct Config;

class RunHead {
 public:
  enum class Kind { kRegression, kGaussian, kClassification };

  static RunHead Regression(int targets = 1) { return RunHead(Kind::kRegression, 0, targets < 1 ? 1 : targets); }
  static RunHead Gaussian() { return RunHead(Kind::kGaussian, 0, 1); }
  static RunHead Classification(int classes) { return RunHead(Kind::kClassification, classes, 1); }
  // The head of members trained with `loss` on a run of `classes` classes (0: regression) and
  // `targets` regression targets (0 counts as 1).
  static RunHead For(LossKind loss, int classes, int targets);
  // A config's head: classification when its task is (`classes` may be 0 before the data is
  // read), else its members' loss (the config makes every member agree on Gaussian or not; a
  // member list that is empty reads as plain regression).
  static RunHead For(const Config& cfg, int classes, int targets);

  Kind kind() const { return kind_; }
  bool classification() const { return kind_ == Kind::kClassification; }
  bool gaussian() const { return kind_ == Kind::kGaussian; }
  int classes() const { return classes_; }  // 0 unless classification
  int targets() const { return targets_; }  // regression targets (1 for the other kinds)
  // Values a member predicts per row (its output width, and the values per row of its
  // prediction files): one per class, [mean, variance], or one per target.
  int OutputWidth() const { return classification() ? classes_ : gaussian() ? 2 : targets_; }
  // mutation.score when the config gives none.
  CommitteeScore DefaultScore() const {
    return classification() ? CommitteeScore::kBald : gaussian() ? CommitteeScore::kEpistemic : CommitteeScore::kStd;
  }
  // Why `score` does not apply to this head ("" when it does): entropy and bald score class
  // probabilities, epistemic a Gaussian head's means.
  std::string ScoreProblem(CommitteeScore score) const;
  // What a committee computes for `asked`: a Gaussian head's "std" is the spread of its means
  // (its variances are the data's noise), which is "epistemic".
  CommitteeScore Effective(CommitteeScore asked) const {
    return gaussian() && asked == CommitteeScore::kStd ? CommitteeScore::kEpistemic : asked;
  }
  // The member metric the run is judged by: holdout_accuracy (higher is better) or holdout_rmse.
  const char* ScoreMetric() const { return classification() ? "holdout_accuracy" : "holdout_rmse"; }

 private:
  RunHead(Kind kind, int classes, int targets) : kind_(kind), classes_(classes), targets_(targets) {}
  Kind kind_;
  int classes_;
  int targets_;
};

}  // namespace ens
