/** The board's pages, one file per page (the layout and formatters they share in `layout.ts`). */
export { type BoardPageContext, type BoardAction, type BoardActionInput, layout, pickerPage } from './layout';
export { overviewFragment, overviewPage } from './overview';
export { failuresPage } from './failures';
export { eventPage } from './event';
export { consumersPage } from './consumers';
export { auditPage } from './audit';
export { describeAction, confirmPage, errorPage } from './actions';
