/** The board's pages, one file per page (the layout and formatters they share in `layout.ts`). */
export {
  type BoardPageContext,
  type BoardAction,
  type BoardActionInput,
  layout,
  pickerPage,
} from './layout.view';
export { overviewFragment, overviewPage } from './overview.view';
export { failuresPage } from './failures.view';
export { eventPage } from './event.view';
export { consumersPage } from './consumers.view';
export { auditPage } from './audit.view';
export { doctorPage } from './doctor.view';
export { describeAction, confirmPage, errorPage, bulkForm } from './actions.view';
export { searchPage, type BoardSearch } from './search.view';
